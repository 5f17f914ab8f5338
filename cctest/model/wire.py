"""What a packet is on the emulated wire: the sizes every layer counts with, defined once."""

ETHERNET_HEADER_BYTES = 14  # what the shaper counts on top of the IP packet
MTU_BYTES = 1500  # the interfaces' default, which the topology keeps
ETHERNET_FRAME_BYTES = MTU_BYTES + ETHERNET_HEADER_BYTES  # one MTU-sized packet on the wire, the smallest buffer
IP_TCP_TIMESTAMP_HEADER_BYTES = 20 + 20 + 12  # IPv4, TCP and its timestamp option: MSS = MTU - this
