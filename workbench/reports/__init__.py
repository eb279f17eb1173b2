"""Documents made from the store: performance tables, the README's, Nsight Compute."""
