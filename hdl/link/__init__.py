"""The board's control link: a framed, checksummed request/response protocol over a UART."""
