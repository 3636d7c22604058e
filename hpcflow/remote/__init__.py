"""Running hpcflow on other machines over SSH (fabric): the node bootstrap fan-out."""
