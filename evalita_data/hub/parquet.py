"""Deterministic Parquet files of the splits, typed from the task's JSON Schema.

Same records + same pyarrow version -> same bytes: fixed writer settings, no
timestamps, and the only key-value metadata is the ``huggingface`` features entry
(sorted JSON) that ``datasets`` reads, so loading gives exactly the schema's types.
"""

from __future__ import annotations

import io
import json
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import EvalitaDataError
from ..registry import get_task
from ..schema_check import load_schema

# Fixed writer settings; changing any of them changes every published file.
_WRITER_SETTINGS = dict(
    compression="zstd",
    compression_level=9,
    version="2.6",
    data_page_version="1.0",
    use_dictionary=True,
    write_statistics=True,
    write_page_index=False,
    write_page_checksum=False,
    store_schema=True,
)
ROW_GROUP_SIZE = 100_000


def _scalar(node: dict, where: str) -> tuple[pa.DataType, dict]:
    kind = node.get("type")
    if kind == "string":
        return pa.string(), {"dtype": "string", "_type": "Value"}
    if kind == "integer":
        return pa.int64(), {"dtype": "int64", "_type": "Value"}
    if kind == "number":
        return pa.float64(), {"dtype": "float64", "_type": "Value"}
    if kind == "boolean":
        return pa.bool_(), {"dtype": "bool", "_type": "Value"}
    raise EvalitaDataError(f"{where}: JSON Schema type {kind!r} has no Parquet mapping")


def _convert(node: dict, where: str) -> tuple[pa.DataType, object]:
    """(Arrow type, ``datasets`` feature dict) of one JSON Schema node."""
    kind = node.get("type")
    if kind == "object":
        fields, features = [], {}
        for name, sub in node["properties"].items():
            atype, feat = _convert(sub, f"{where}.{name}")
            fields.append(pa.field(name, atype, nullable=False))
            features[name] = feat
        return pa.struct(fields), features
    if kind == "array":
        # A fixed-length tuple (prefixItems) of one type is stored as a list of that type.
        items = node.get("prefixItems") or [node.get("items")]
        converted = {json.dumps(_convert(i, f"{where}[]")[1], sort_keys=True): _convert(i, f"{where}[]") for i in items}
        if len(converted) != 1:
            raise EvalitaDataError(f"{where}: array items of mixed types have no Parquet mapping")
        atype, feat = next(iter(converted.values()))
        # The list form of a sequence is read by every ``datasets`` version.
        return pa.list_(atype), [feat]
    return _scalar(node, where)


def task_schema(task_id: str) -> tuple[pa.Schema, dict]:
    """Arrow schema (field order as in the JSON Schema) and ``datasets`` features of a task."""
    spec = get_task(task_id)
    struct, features = _convert(load_schema(spec.schema), spec.schema)
    metadata = {"huggingface": json.dumps({"info": {"features": features}}, sort_keys=True, ensure_ascii=False)}
    schema = pa.schema(list(struct), metadata=metadata)
    return schema, features


def parquet_bytes(task_id: str, records: Iterable[dict]) -> bytes:
    """The Parquet file of one split: every record of the schema, in the given order."""
    schema, _ = task_schema(task_id)
    rows = list(records)
    columns = [pa.array([r[f.name] for r in rows], type=f.type) for f in schema]
    table = pa.Table.from_arrays(columns, schema=schema)
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=ROW_GROUP_SIZE, **_WRITER_SETTINGS)
    return buf.getvalue()
