package testutil

// ExtauthzExposition is a Prometheus text exposition as extauthz serves it
// beside the bridge: one family of its own, and one the bridge exports too
// (the bridge must keep its own value of that one when it re-exports).
const ExtauthzExposition = `# HELP wirekube_extauthz_checks_total Checks.
# TYPE wirekube_extauthz_checks_total counter
wirekube_extauthz_checks_total{reason="token_invalid",result="deny"} 3
# HELP wirekube_bridge_sessions_active Not the bridge's.
# TYPE wirekube_bridge_sessions_active gauge
wirekube_bridge_sessions_active 99
`
