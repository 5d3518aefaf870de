"""The run record: results.json and samples/*.jsonl of `evalita-eval run`, typed, versioned (JSON Schemas
``results.schema.json`` and ``sample.schema.json`` beside this file) and read by one checking reader.
docs/run-record.md."""

from .build import run_id
from .comparable import NOT_COMPARABLE, comparability_text
from .migrate import RecordError
from .model import FORMAT_VERSION, RecordedMetric, RunRecord
from .read import RESULTS_SCHEMA, SAMPLE_SCHEMA, parse_record, read_run

__all__ = ["FORMAT_VERSION", "NOT_COMPARABLE", "RESULTS_SCHEMA", "SAMPLE_SCHEMA", "RecordError", "RecordedMetric",
           "RunRecord", "comparability_text", "parse_record", "read_run", "run_id"]
