package httpapi

import (
	"cmp"
	"net/http"

	"github.com/sessionlog/sessionlog/pkg/schema"
	"github.com/sessionlog/sessionlog/services/projector/store"
)

// Fork tree bounds: ancestors are followed up to maxTreeDepth, descendants
// listed breadth first up to maxTreeNodes.
const (
	maxTreeDepth = 64
	maxTreeNodes = 500
)

// TreeNode is one session of a fork tree. Cut is the seed length of the
// fork that made it: the child holds its parent's events 1..Cut.
type TreeNode struct {
	SessionID string `json:"sessionId"`
	Parent    string `json:"parent,omitempty"`
	Cut       uint64 `json:"cut,omitempty"`
	Depth     int    `json:"depth"`
	Status    string `json:"status,omitempty"`
	Title     string `json:"title,omitempty"`
	LastSeq   uint64 `json:"lastSeq"`
	// Missing: the projector has no view of it (not folded yet, or gone).
	Missing bool `json:"missing,omitempty"`
}

// Tree is GET /v1/sessions/{id}/tree: the session's ancestors (root first)
// and its descendants (breadth first, each naming its parent).
type Tree struct {
	SessionID   string     `json:"sessionId"`
	Ancestors   []TreeNode `json:"ancestors"`
	Self        TreeNode   `json:"self"`
	Descendants []TreeNode `json:"descendants"`
	// Truncated: more descendants than maxTreeNodes.
	Truncated bool `json:"truncated,omitempty"`
}

func nodeOf(id string, sum *store.Summary) TreeNode {
	n := TreeNode{SessionID: id, Missing: sum == nil}
	if sum != nil {
		n.Status, n.Title, n.LastSeq = sum.Status, sum.Title, sum.LastSeq
		if p := sum.Parent; p != nil {
			n.Parent, n.Cut, n.Depth = p.SessionID, p.SeedLength, p.Depth
		}
	}
	return n
}

func (s *Server) handleTree(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionID(w, r)
	if !ok {
		return
	}
	var out *Tree
	err := s.view(func(rd reader) error {
		keep, listed := visible(r, rd), s.listed(r, rd)
		sum, err := rd.summary(id)
		if err != nil || sum == nil {
			return err
		}
		out = &Tree{SessionID: id, Self: nodeOf(id, sum), Ancestors: []TreeNode{}, Descendants: []TreeNode{}}
		seen := map[string]bool{id: true}
		// A tenant's tree holds its own sessions only: an operator may fork
		// across tenants.
		for p := sum.Parent; p != nil && len(out.Ancestors) < maxTreeDepth && !seen[p.SessionID] && (keep == nil || keep(p.SessionID)); {
			seen[p.SessionID] = true
			ps, err := rd.summary(p.SessionID)
			if err != nil {
				return err
			}
			out.Ancestors = append([]TreeNode{nodeOf(p.SessionID, ps)}, out.Ancestors...)
			if ps == nil {
				break
			}
			p = ps.Parent
		}
		queue := []string{id}
		for len(queue) > 0 {
			parent := queue[0]
			queue = queue[1:]
			var serr error
			err := rd.snap.Children(parent, func(child string) bool {
				if seen[child] || !listed(child) {
					return true
				}
				if len(out.Descendants) == maxTreeNodes {
					out.Truncated = true
					return false
				}
				seen[child] = true
				cs, err := rd.summary(child)
				if err != nil {
					serr = err
					return false
				}
				n := nodeOf(child, cs)
				n.Parent = parent
				out.Descendants = append(out.Descendants, n)
				queue = append(queue, child)
				return true
			})
			if err := cmp.Or(serr, err); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		s.internal(w, err)
		return
	}
	if out == nil {
		apiError(w, http.StatusNotFound, schema.CodeNotFound, "no session "+id)
		return
	}
	if n := namesOf(r); n.scoped() {
		out.SessionID = n.wire(out.SessionID)
		name := func(t *TreeNode) { t.SessionID, t.Parent = n.wire(t.SessionID), n.wire(t.Parent) }
		name(&out.Self)
		for i := range out.Ancestors {
			name(&out.Ancestors[i])
		}
		for i := range out.Descendants {
			name(&out.Descendants[i])
		}
	}
	writeJSON(w, out)
}
