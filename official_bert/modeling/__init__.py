"""What a network is: the config, the layers, the encoder and every head around it."""
