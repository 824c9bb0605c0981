"""clew.reports: what is read out of finished run directories: ``clew report`` (tables, plots,
HTML), ``clew diagnose`` (search roles against ground truth) and ``clew view`` (one tree as an
HTML page)."""
