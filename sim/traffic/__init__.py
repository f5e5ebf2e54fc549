"""Traffic for the testbenches: frames from the model's codecs, cut into beats."""
