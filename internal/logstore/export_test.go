package logstore

// Plain returns cfg for a store that writes plain bodies also in a build
// with the tag sealforced (SealForced), for a test that needs plain
// bodies in the stream: a session mixing plain and sealed events, the
// "plain" run of natstest.ForEachSealing.
func Plain(cfg Config) Config {
	cfg.plain = true
	return cfg
}
