"""privlab: assess -> protect -> audit -> choose epsilon -> report, with honest DP guarantees."""

from privlab.errors import (
    BudgetExceededError,
    InvalidInputError,
    PrivlabError,
    UnsafeConfigurationError,
)

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "PrivlabError",
    "InvalidInputError",
    "BudgetExceededError",
    "UnsafeConfigurationError",
]
