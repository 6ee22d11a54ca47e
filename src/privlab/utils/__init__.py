"""Small shared utilities (atomic file writes, storable text)."""
