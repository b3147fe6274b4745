package writer

import (
	"context"

	"github.com/sessionlog/sessionlog/internal/logstore"
	"github.com/sessionlog/sessionlog/pkg/schema"
)

// refuseErased answers erased for a session id that was erased or is
// being erased (DESIGN.md section 14), not_committed when that cannot be
// known.
func refuseErased(ctx context.Context, st *logstore.Store, sessionID string) error {
	erased, err := st.Erased(ctx, sessionID)
	if err != nil {
		return schema.Errorf(schema.CodeNotCommitted, "cannot check the session id: %v", err)
	}
	if erased {
		return schema.Errorf(schema.CodeErased, "session %s was erased; use another id", sessionID)
	}
	return nil
}
