"""Memory: the standing facts and instructions a person gave ("Call me Sam", "Use metric
units"), served in their requests at once and distilled into their own adapter."""
