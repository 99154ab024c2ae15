"""A schema registry speaking Confluent's REST API v1, kept in a compacted `_schemas` topic.

Layers, top down: `app` (process: store + server) -> `server` (aiohttp routes),
`auth` -> `store` (the `_schemas` topic through aiokafka) -> `state` (pure:
subjects, versions, ids, config, mode; applies records) -> `compatibility`
(`avro_compat`, `json_compat`, `protobuf_compat`) -> `protobuf_parse` (protoc) ->
`records`, `model`, `errors`.
"""
