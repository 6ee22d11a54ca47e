"""The `privlab` command line: a thin Typer shell over the library (one module per verb)."""
