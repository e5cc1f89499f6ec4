"""Commands of `bert` beyond google's scripts: each parses its flags and calls the library."""
