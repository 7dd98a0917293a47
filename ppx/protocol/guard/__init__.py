"""The congruence guard's designs (`engine.guard.*`) and the guard rank 0 composes of them."""
