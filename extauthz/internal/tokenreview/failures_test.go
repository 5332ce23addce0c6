package tokenreview

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var tokenReviews = schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}

// refused is the error client-go returns when nothing listens at the API
// address.
func refused() error {
	return &url.Error{Op: "Post", URL: "https://10.0.0.1:6443/apis/authentication.k8s.io/v1/tokenreviews",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
}

var errFakeAPI = errors.New("fake api: connection refused")

func TestReviewFailCategory(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"deadline", fmt.Errorf("post: %w", context.DeadlineExceeded), FailTimeout},
		{"canceled", context.Canceled, FailCanceled},
		{"connection refused", refused(), FailConnRefused},
		{"429", apierrors.NewTooManyRequests("slow down", 1), FailRateLimited},
		{"403", apierrors.NewForbidden(tokenReviews, "", errors.New("rbac")), FailForbidden},
		{"401", apierrors.NewUnauthorized("who"), FailUnauthorized},
		{"500", apierrors.NewInternalError(errors.New("boom")), FailServerError},
		{"503", apierrors.NewServiceUnavailable("later"), FailServerError},
		{"504", apierrors.NewTimeoutError("slow", 1), FailTimeout},
		{"400", apierrors.NewBadRequest("no"), FailOther},
		{"plain error", errFakeAPI, FailOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := reviewFailCategory(tt.err); got != tt.want {
				t.Errorf("category %q, want %q", got, tt.want)
			}
		})
	}
}
