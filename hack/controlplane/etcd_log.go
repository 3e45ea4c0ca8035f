package main

import "go.etcd.io/etcd/server/v3/embed"

// quietCheapRequests sets the duration past which etcd logs a request as "expensive":
// NewConfig leaves it at 0, which logs every request.
func quietCheapRequests(cfg *embed.Config) {
	cfg.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
}
