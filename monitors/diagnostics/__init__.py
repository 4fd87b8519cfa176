"""Diagnostics computed from what the model already holds (#15): why a workload is pending or what
is wrong with it (`why`), idle interactive sessions (`idle`). No API or Prometheus request of
their own: they read `monitors.model.LiveModel` (records, views, GPU history, last log times)."""
