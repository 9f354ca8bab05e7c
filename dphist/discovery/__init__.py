"""Private domain discovery: bounds, bins, categories and types of the columns a schema does not declare, paid from the privacy kernel."""
