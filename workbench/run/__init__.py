"""Running work: the supervised engine child, a job's events, how they read, progress."""
