"""How a point is measured: the timer, the accuracy check, noise, the machine record."""
