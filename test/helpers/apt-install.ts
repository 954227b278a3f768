/** Where apt puts programs, searched after an install even when the caller's PATH lacks them. */
export const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * Installs Debian packages with apt-get (updating its lists once if the first try fails), so
 * `npm install && npm test` passes on a fresh machine. Several test processes may install at
 * once: it waits for apt's lock instead of failing on it. Throws with apt's own words on failure.
 */
export async function aptInstall(packages: string[]): Promise<void> {
  const env = { ...process.env, PATH: `${process.env.PATH ?? ""}:${SYSTEM_PATH}`, DEBIAN_FRONTEND: "noninteractive" };
  const apt = "apt-get -y -q -o DPkg::Lock::Timeout=300";
  const names = packages.join(" ");
  const install = Bun.spawn(["/bin/sh", "-c", `${apt} install ${names} || (${apt} update && ${apt} install ${names})`], {
    env,
    stdin: "ignore",
    stdout: "ignore",
    stderr: "pipe",
  });
  const [stderr, code] = await Promise.all([new Response(install.stderr).text(), install.exited]);
  if (code !== 0) throw new Error(`apt-get install ${names} failed (exit ${code}): ${stderr.slice(-2000)}`);
}
