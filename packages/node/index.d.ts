/** This package's version (the bundled library's must be the same). */
export const VERSION: string;
export class AlkstoreError extends Error {}
export interface Job {
  id: number; queue: string; payload: unknown; attempts: number; max_attempts: number; claim_expires_at: string;
}
/** A better-sqlite3 Database or a pg Client. */
export type Connection = any;
export function loadablePath(): string;
export function load<T>(db: T): T;
export function version(db?: Connection): Promise<{ package: string; library: string; schema: number }>;
export function enqueue(db: Connection, queue: string, payload: unknown, opts?: Record<string, unknown>): Promise<number>;
export function claim(db: Connection, queue: string, worker: string, maxJobs?: number): Promise<Job[]>;
export function ack(db: Connection, jobId: number, worker: string, result?: unknown): Promise<boolean>;
/** Acks many held jobs in one call (alk_ack_batch, no results): how many this worker held. */
export function ackBatch(db: Connection, jobIds: number[], worker: string): Promise<number>;
export function retry(db: Connection, jobId: number, worker: string, error: string, delayS?: number | null): Promise<string | null>;
export function fail(db: Connection, jobId: number, worker: string, error: string): Promise<boolean>;
/** Extends a held job's claim; true if this worker still held it. */
export function heartbeat(db: Connection, jobId: number, worker: string, extendS?: number | null): Promise<boolean>;
/** Gives a held job back without spending an attempt (alk_release). */
export function release(db: Connection, jobId: number, worker: string, delayS?: number | null): Promise<boolean>;
/** release for many jobs: how many this worker held. */
export function releaseBatch(db: Connection, jobIds: number[], worker: string, delayS?: number | null): Promise<number>;
/** Returned by a work() handler: run the job again after `seconds`, no attempt spent. */
export class Snooze { constructor(seconds: number); readonly seconds: number; }
export function snooze(seconds: number): Snooze;
/** handler: return a result to ack with it, or snooze(seconds); throw to retry.
 * Runs up to `concurrency` handlers at once (they share `db`: open
 * transactions on connections of their own). Claims up to `prefetch` jobs
 * (or the free handlers) at a time and acks those that returned nothing
 * together within `flushWindowMs` / `flushMax` (contract v1.3 §P); heartbeats
 * keep every held job claimed; stats (yours) counts handled jobs, lost claims,
 * batched acks and reconnects. */
export function work(db: Connection, queue: string, worker: string, handler: (job: Job) => unknown,
  opts?: { signal?: AbortSignal; idleMs?: number; tickEveryMs?: number | null;
    sweepEveryMs?: number | null; pruneEveryMs?: number | null;
    concurrency?: number; prefetch?: number; flushWindowMs?: number; flushMax?: number; prefetchTtlMs?: number | null;
    stats?: { handled?: number; lostClaims?: number; ackFlushes?: number; reconnects?: number } }): Promise<number>;
