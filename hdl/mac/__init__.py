"""The gigabit Ethernet MAC of the board builds: GMII framing, FCS, store-and-forward, clock-domain crossing, RGMII."""
