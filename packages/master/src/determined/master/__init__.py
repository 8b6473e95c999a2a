"""det-master."""
