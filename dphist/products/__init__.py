"""What is made from a published release, reading only the release: synthetic records and pictures."""
