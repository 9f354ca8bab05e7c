"""The release path: the plan, its execution, the transaction that charges the ledger and publishes the files, and the tables, report and writers."""
