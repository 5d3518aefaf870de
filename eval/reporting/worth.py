"""What a score is worth: how many items it rests on (comparability: record/comparable.py). A score on fewer than
``MIN_ITEMS`` is "not a measurement": below 30 items the 95 % interval of an accuracy near 50 % is wider than ±18 points
(1.96·√(0.25/30) = 0.179), more than the differences between models the benchmark exists to show."""

from __future__ import annotations

MIN_ITEMS = 30
NOT_A_MEASUREMENT = f"not a measurement: fewer than {MIN_ITEMS} items"
