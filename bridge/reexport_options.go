package bridge

import "github.com/wirekube/relay-ws/bridge/internal/reexport"

// ReexportOptions are the flag of the other containers' metrics
// (--reexport-metrics).
type ReexportOptions = reexport.Options

// ReexportPath serves, on the metrics listener, the bridge's families and
// those of the other containers of its Pod (--reexport-metrics); /metrics
// stays the bridge's own.
const ReexportPath = reexport.Path
