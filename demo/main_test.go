package demo

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/wirekube/relay-ws/internal/test/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testutil.ClientGoLeaks()...) }
