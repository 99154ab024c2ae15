"""The transaction coordinator (KIP-98, KIP-360, KIP-447): pure state machine, records, and its asyncio runtime.

    state.py        TransactionMetadata and its state table; each request is a pure decision
    records.py      __transaction_state keys and values in Kafka's layouts (TransactionLogKey/Value v0)
    errors.py       the package's exceptions (IllegalTransition names state and event)
    coordinator.py  TransactionCoordinator: loads partitions, writes state, sends markers, aborts timed-out transactions

Like `groups`, the coordinator never touches logs or sockets itself: it gets a
`TxnStateLog` (append/read a __transaction_state partition) and a
`MarkerWriter` (WriteTxnMarkers to partition leaders); `coordinators/`
implements both over the broker.
"""
