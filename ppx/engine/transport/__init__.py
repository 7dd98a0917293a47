"""Point-to-point transports: ordered tensors between a pair of ranks."""
