"""Data access: readers with clear errors and the bundled datasets."""

from privlab.data.datasets import list_datasets, load_dataset
from privlab.data.io import read_table

__all__ = ["list_datasets", "load_dataset", "read_table"]
