"""What the steward declares before any row is read: schemas, job specs, the YAML they are written in, the non-private draft, option names, and the ledger's data set ids and run keys."""
