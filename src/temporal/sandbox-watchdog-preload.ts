// The worker process's `node --require` entry (scripts/start.sh, docker-compose.yml): it runs in
// the main thread and in the SDK's workflow thread. See sandbox-watchdog.ts.
import { installSandboxWatchdog, STUCK_CALL_MS } from './sandbox-watchdog';

installSandboxWatchdog(STUCK_CALL_MS);
