"""What a token is: the Python tokenizer and its in-graph twin."""
