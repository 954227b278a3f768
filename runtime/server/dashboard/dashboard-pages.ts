import page from "./ui/index.html";

/**
 * Bun.serve routes of the dashboard page. Bun bundles the page's scripts and styles from source
 * on first request (kept in memory), and into the executable under `bun build --compile`. The
 * server's root leads a browser there.
 */
export const dashboardPages = {
  "/dashboard": page,
  "/dashboard/": page,
  "/": { GET: () => new Response(null, { status: 302, headers: { location: "/dashboard" } }) },
};
