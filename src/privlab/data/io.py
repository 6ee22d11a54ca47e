"""Reading user tables (CSV / TSV / Parquet / gzip) with one-line errors that name the fix.

Every verb that takes a FILE goes through `read_table`, so an empty file, a non-UTF-8 file,
a missing or duplicate column reads the same way everywhere.

The reading rule (docs/guarantees.md, "How rows are read"): a CSV cell is read as its text,
never as a type guessed from the other cells of its column (pandas' inference would read "01"
as 1 on one file and as "01" on its neighbour with one more row "XX"). Each cell is stripped of
surrounding whitespace; a cell that is then empty, or one of the missing markers
(`DEFAULT_MISSING`), is missing: a blank cell and a whitespace-only cell are the same missing
value. Parquet columns keep their physical types (nullable integers stay exact integers).
Types are given to the text afterwards, value by value, by the declared schema
(`privlab.schema.read.read_declared`) or by a command's own options (`--bounds`).
`infer=True` keeps pandas' inference for the few exploratory outputs that are labelled NOT
differentially private and have no schema (assess, anonymize, train --unsafe-encoding).
"""

from __future__ import annotations

import csv
import gzip
import io
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from privlab.errors import InvalidInputError

DEFAULT_MISSING = ("?", "", "NA", "N/A", "NaN", "nan", "null", "NULL", "None")


def _open_bytes(path: Path) -> bytes:
    if not path.exists():
        raise InvalidInputError(f"file not found: {path}")
    if path.is_dir():
        raise InvalidInputError(f"expected a file, got a directory: {path}")
    raw = path.read_bytes()
    if path.suffix == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise InvalidInputError(f"{path} ends in .gz but is not a valid gzip file (not "
                                    "compressed, corrupt or truncated)") from None
    return raw


def read_table(path: str | Path, *, delimiter: str | None = None,
               missing_values: Sequence[str] = DEFAULT_MISSING,
               allow_empty: bool = False, infer: bool = False) -> pd.DataFrame:
    """Read a CSV/TSV (optionally .gz) or Parquet file into a DataFrame.

    Column names are stripped of surrounding spaces; string cells too. The delimiter is
    sniffed among , ; tab | when not given (from the header line and the first rows: a wrong
    sniff fails on every neighbour alike or reads the header wrong). CSV cells are text
    (object column of str) and missing markers become None; see the module docstring.
    `allow_empty`: a header without rows is a table of 0 rows (a DP release must treat it
    like its one-row neighbour); otherwise it is refused. `infer`: pandas' type inference
    (NOT-DP exploratory outputs only).
    """
    path = Path(path)
    if path.suffix.lower() in (".xlsx", ".xls", ".ods"):
        raise InvalidInputError(f"{path} is a spreadsheet; export it as CSV or Parquet first")
    if path.suffix == ".parquet":
        if not path.exists():
            raise InvalidInputError(f"file not found: {path}")
        try:
            frame = pd.read_parquet(path) if infer else _read_parquet_exact(path)
        except Exception as exc:  # pyarrow raises several types for a bad file
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise InvalidInputError(f"cannot read Parquet file {path}: {first}") from None
        return _check_frame(frame, path, allow_empty)
    if delimiter is not None and len(delimiter) != 1:
        raise InvalidInputError(f"delimiter must be one character, got {delimiter!r}")
    raw = _open_bytes(path)
    if not raw.strip():
        raise InvalidInputError(f"{path} is empty: it needs a header line and at least one row")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{path} is not valid UTF-8 (byte {exc.start}); re-save it as UTF-8, e.g. "
            f"iconv -f latin1 -t utf-8") from None
    if delimiter is None:
        sample = "\n".join(text.splitlines()[:50])
        try:
            delimiter = csv.Sniffer().sniff(sample, delimiters=",;\t|").delimiter
        except csv.Error:
            delimiter = ","
    header = next(csv.reader([text.splitlines()[0]], delimiter=delimiter))
    names = [h.strip() for h in header]
    blank = [i + 1 for i, n in enumerate(names) if not n]
    if blank and len(names) > 1:
        raise InvalidInputError(f"{path} has an empty column name (column {blank[0]}); give "
                                "every column a name in the header line")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidInputError(f"{path} has duplicate column names: {', '.join(dupes)}; "
                                "rename them so each column is unique")
    try:
        with warnings.catch_warnings():
            # index_col=False: a first row with one field too many must not become an index.
            warnings.simplefilter("error", pd.errors.ParserWarning)
            if infer:
                frame = pd.read_csv(io.StringIO(text), sep=delimiter, skipinitialspace=True,
                                    na_values=list(missing_values), keep_default_na=False,
                                    index_col=False)
            else:
                # every cell as its text: no value decides how another one is read
                frame = pd.read_csv(io.StringIO(text), sep=delimiter, dtype=object,
                                    keep_default_na=False, na_filter=False, index_col=False)
    except pd.errors.ParserWarning:
        raise InvalidInputError(f"cannot parse {path} with delimiter {delimiter!r}: a row has "
                                f"more fields than the {len(names)} in the header; fix the "
                                "row or pass the right delimiter") from None
    except pd.errors.ParserError as exc:
        raise InvalidInputError(f"cannot parse {path} with delimiter {delimiter!r}: "
                                f"{str(exc).splitlines()[0]}; check quoting or pass the right "
                                "delimiter") from None
    if len(names) == frame.shape[1]:
        frame.columns = names
    if not infer:
        marks = frozenset(missing_values) | {""}
        for col in frame.columns:
            frame[col] = _cells(frame[col], marks)
        return _check_frame(frame, path, allow_empty)
    for col in frame.columns:
        if frame[col].dtype == object or str(frame[col].dtype).startswith("str"):
            frame[col] = frame[col].str.strip() if hasattr(frame[col], "str") else frame[col]
    return _check_frame(frame, path, allow_empty)


def _cells(column: pd.Series, marks: frozenset[str]) -> pd.Series:
    """One column's cells by the reading rule: stripped text, a missing marker -> None."""
    values = [None if not isinstance(v, str) or (t := v.strip()) in marks else t
              for v in column.tolist()]  # a short row's absent cells come back as NaN
    return pd.Series(values, index=column.index, name=column.name, dtype=object)


def _read_parquet_exact(path: Path) -> pd.DataFrame:
    """A Parquet file by its physical types, with integers exact: a nullable integer column
    stays integer (pandas would turn it into float64 and a 19-digit id would lose digits)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    ints = {t: pd.Int64Dtype() for t in ("int8", "int16", "int32", "int64")}
    ints.update({t: pd.UInt64Dtype() for t in ("uint8", "uint16", "uint32", "uint64")})
    frame = table.to_pandas(types_mapper=lambda t: ints.get(str(t)))
    for col in frame.columns:  # integers without a missing value: plain int64 / uint64
        if isinstance(frame[col].dtype, (pd.Int64Dtype, pd.UInt64Dtype)) and \
                not frame[col].isna().any():
            frame[col] = frame[col].to_numpy(dtype=frame[col].dtype.numpy_dtype)
    return frame


def _check_frame(frame: pd.DataFrame, path: Path, allow_empty: bool = False) -> pd.DataFrame:
    if frame.shape[1] == 0 or (frame.shape[0] == 0 and not allow_empty):
        raise InvalidInputError(f"{path} has no data rows; it needs a header and at least one row")
    if frame.shape[1] == 1 and (frame.shape[0] > 0 or allow_empty):
        only = str(frame.columns[0])
        for sep in (",", ";", "\t", "|"):
            if sep in only:
                raise InvalidInputError(f"{path} looks delimited by {sep!r} but was read as one "
                                        f"column; pass --delimiter '{sep}'")
    return frame


def require_columns(frame: pd.DataFrame, columns: Sequence[str], field: str = "column") -> None:
    """Raise a one-line error naming the first unknown column and the ones that exist."""
    for col in columns:
        if col not in frame.columns:
            have = ", ".join(map(str, frame.columns[:20]))
            raise InvalidInputError(f"unknown {field} {col!r}; the table has: {have}")
