from gw_fixtures import *  # noqa: F401,F403 - fixtures shared with tests/service
