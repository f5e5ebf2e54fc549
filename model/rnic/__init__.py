"""The software RNIC: every layer of the model joined into one host, its events, and the impaired in-memory link."""
