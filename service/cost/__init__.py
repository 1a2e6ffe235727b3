"""What a job would cost on Vertex AI: a dated price table (prices.py) and the arithmetic
(estimate.py). Pure: no database, no web. Every figure is an estimate."""
