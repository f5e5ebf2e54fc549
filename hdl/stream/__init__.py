"""Stream components shared by every datapath: the packet layout, queues, buffers, arbiters, realignment, CRC32c."""
