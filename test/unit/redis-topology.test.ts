import { parseRedisUrl, RedisUrlError } from '../../src/adapters/redis/redis-topology';

describe('REDIS_URL forms', () => {
  it('keeps a plain redis:// or rediss:// URL as it is', () => {
    expect(parseRedisUrl('redis://cache:6380/2')).toEqual({ kind: 'single', url: 'redis://cache:6380/2' });
    expect(parseRedisUrl('rediss://user:pw@cache:6380')).toEqual({ kind: 'single', url: 'rediss://user:pw@cache:6380' });
  });

  it('reads the seed nodes and credentials of a redis+cluster URL', () => {
    expect(parseRedisUrl('redis+cluster://app:s%40cret@10.0.0.1:7001,10.0.0.2:7002,[::1]:7003,node4')).toEqual({
      kind: 'cluster',
      nodes: [
        { host: '10.0.0.1', port: 7001 },
        { host: '10.0.0.2', port: 7002 },
        { host: '::1', port: 7003 },
        { host: 'node4', port: 6379 },
      ],
      username: 'app',
      password: 's@cret',
      tls: false,
    });
    expect(parseRedisUrl('rediss+cluster://:pw@a:1')).toMatchObject({ kind: 'cluster', password: 'pw', tls: true });
    expect(parseRedisUrl('rediss+cluster://:pw@a:1')).not.toHaveProperty('username');
  });

  it('reads the sentinels, master name, database and sentinel credentials of a redis+sentinel URL', () => {
    expect(parseRedisUrl('redis+sentinel://:pw@s1:26379,s2,s3:26381/mymaster/3?sentinelPassword=sp')).toEqual({
      kind: 'sentinel',
      sentinels: [
        { host: 's1', port: 26379 },
        { host: 's2', port: 26379 },
        { host: 's3', port: 26381 },
      ],
      masterName: 'mymaster',
      db: 3,
      password: 'pw',
      sentinelPassword: 'sp',
      tls: false,
    });
    expect(parseRedisUrl('redis+sentinel://s1/mymaster')).toMatchObject({ masterName: 'mymaster', db: 0 });
  });

  it.each([
    ['http://cache:6379', /must start with one of redis:\/\/, rediss:\/\/, redis\+cluster:\/\//],
    ['cache:6379', /must start with/],
    ['redis+cluster://', /names no host/],
    ['redis+cluster://a:1,,b:2', /invalid host entry ""/],
    ['redis+cluster://a:70000', /invalid port/],
    ['redis+cluster://a:1/2', /only database 0/],
    ['redis+sentinel://s1:26379', /must end with the master name/],
    ['redis+sentinel://s1:26379/', /must end with the master name/],
    ['redis+sentinel://s1/m/x', /\/master-name or \/master-name\/db/],
    ['redis+sentinel://s1/m/1/2', /\/master-name or \/master-name\/db/],
    ['redis+cluster://u:%zz@a:1', /percent-encoding/],
    ['redis+cluster://a b:1', /invalid host entry/],
  ])('refuses %s with a message that names the problem', (url, message) => {
    expect(() => parseRedisUrl(url)).toThrow(RedisUrlError);
    expect(() => parseRedisUrl(url)).toThrow(message);
  });

  it('never echoes a password in its error', () => {
    let message = '';
    try {
      parseRedisUrl('redis+cluster://user:hunter2@a:99999');
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/invalid port/);
    expect(message).not.toContain('hunter2');
  });
});
