"""What a job is: one module per task family, and the run flow they share."""
