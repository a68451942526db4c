"""Online adaptation of a pretrained cost model to a new device: MoA and the methods it is compared with."""
