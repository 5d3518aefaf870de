"""One module per task; each declares ``TASK``. The registry collects them."""
