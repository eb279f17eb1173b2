"""What a measurement means: bandwidth, the roofline, comparisons, compiled resources."""
