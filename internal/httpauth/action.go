package httpauth

import (
	"net/http"
	"net/url"
)

// ActionHeader is the header every state-changing request of a dashboard
// must carry (any non-empty value). A page of another origin cannot send a
// custom header without a CORS preflight, which sessionlog never grants,
// so a forged form post or image request cannot carry it.
const ActionHeader = "X-Sessionlog-Action"

// Action guards a state-changing handler against cross-site request
// forgery, on top of Require: the request must carry ActionHeader, an
// Origin (when the browser sends one) of the same host, and, with a token
// configured, that token in the Authorization header. Require takes the
// token from nowhere else either; the check is made here again so that an
// action stays the operator's token's even behind a server whose own check
// is another's (a tenant token, or none), and no request is authorised by
// what a browser attaches by itself.
func Action(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(ActionHeader) == "" {
			refuse(w, http.StatusForbidden, "forbidden", "an action needs the "+ActionHeader+" header")
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host != r.Host {
				refuse(w, http.StatusForbidden, "forbidden", "an action must come from the dashboard's own origin")
				return
			}
		}
		if token != "" {
			v, ok := bearer(r.Header.Get("Authorization"))
			if !ok || !equal(token, v) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="sessionlog"`)
				refuse(w, http.StatusUnauthorized, "unauthorized", "an action needs the bearer token in the Authorization header")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write([]byte(`{"error":{"code":"` + code + `","message":"` + msg + `"}}` + "\n"))
}
